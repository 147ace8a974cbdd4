"""drivers/hcq"""
