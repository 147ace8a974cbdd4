"""drivers/amd"""
