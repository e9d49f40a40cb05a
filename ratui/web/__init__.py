"""`ratui web`: the console served to a browser. server.py serves it, access.py decides who may use it,
registry.py lists the running servers of a project (`ratui web list`)."""

from ratui.web.server import WebOptions, is_loopback, serve, url_for

__all__ = ["WebOptions", "is_loopback", "serve", "url_for"]
