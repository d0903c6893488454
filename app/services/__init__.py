"""The data center's logic, called alike by the API, the Celery tasks and the CLI."""
