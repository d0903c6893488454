"""WSGI entry for gunicorn (`wsgi:app`) and `flask` (found here without FLASK_APP)."""

from app import create_app

app = create_app()
