"""vulnapi: a small forum API."""

from flask import Flask

from . import db
from .config import Config


def create_app(config_object: type = Config) -> Flask:
    app = Flask(__name__)
    app.config.from_object(config_object)

    db.init_app(app)

    from .routes import admin, posts, users

    app.register_blueprint(users.bp)
    app.register_blueprint(posts.bp)
    app.register_blueprint(admin.bp)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app
