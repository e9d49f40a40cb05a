"""Non-Textual helpers of the console: the engine controller, live run state, formatting.

Nothing here imports Textual, so it can be unit-tested and reused (the App imports it, never the reverse).
"""
