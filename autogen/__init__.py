"""autogen"""
