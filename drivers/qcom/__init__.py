"""drivers/qcom"""
