"""Settings of the worker processes that tests start and kill: the test settings, with
e-mails written to files (a test counts them across processes)."""

from config.settings.test import *  # noqa: F403
from config.settings.test import env

EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_FILE_PATH = env("FLEETWISE_TEST_EMAIL_DIR", default="var/test-emails")
