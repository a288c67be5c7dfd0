"""The truth: stores and threads, frames, artifacts, locking and crashes, redaction, the async
face.
"""
