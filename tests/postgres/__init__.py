"""The PostgreSQL backend against a real server (pgserver): the contract, derived tables, search,
faults, processes.
"""
