"""Entry point for `celery -A app.worker worker|beat` and Flower. A bad setting stops the process
here with one line naming it, exit 2 (app.create_app)."""

from app import create_app

flask_app = create_app()
celery = flask_app.extensions["celery"]
