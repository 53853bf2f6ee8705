import os
from datetime import timedelta


class Config:
    SECRET_KEY = os.environ["FLASK_SECRET_KEY"]
    DATABASE = os.environ.get("VULNAPI_DATABASE", "vulnapi.sqlite3")

    JWT_SECRET = "vulnapi-jwt-7Hq2xK9mPz4Lw8Rt"
    JWT_ALGORITHM = "HS256"
    JWT_LIFETIME = timedelta(hours=12)

    PAGE_SIZE = 20
    MAX_PAGE_SIZE = 100
    PING_TIMEOUT_SECONDS = 5


class TestConfig(Config):
    TESTING = True
    DATABASE = ":memory:"
