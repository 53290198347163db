"""The app's two components: fedlib's ServerApp reading this folder's `spec` and fedlib's ClientApp."""
from pathlib import Path

from fedlib.flower.app import client_app, server_app_for

server_app = server_app_for(Path(__file__).resolve().parent)

__all__ = ["client_app", "server_app"]
