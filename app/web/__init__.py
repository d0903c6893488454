"""The web page of the data center, served by the API's app: the seed's status for operators, a
release search with NZB downloads for operators and API-key users, and the login that tells them
apart. Flask templates rendered on the server (app/web/templates), no JavaScript.

The routes are in app.web.views, who is looking (the login, ``?apikey=``, the session's signing
key shared by the gunicorn workers through Redis) in app.web.auth, the status page's figures (the
status' read model, app.services.status, and its chart) in app.web.figures.
"""

from app.web.views import web

__all__ = ["web"]
