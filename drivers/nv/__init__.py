"""drivers/nv"""
