"""Entry point for `celery -A app.worker worker|beat` and Flower."""
from app import create_app

flask_app = create_app()
celery = flask_app.extensions["celery"]
