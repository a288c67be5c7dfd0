"""Agent runtimes' storage interfaces, with the real LangGraph and Agents SDK (marked
``integrations``).
"""
