"""Settings shared by every environment; values come from environment variables."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"  # made at start-up, not here (core.localdirs)

env = environ.Env()
env_file = BASE_DIR / ".env"
if env_file.exists():
    env.read_env(str(env_file))

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-local-only-key-change-me")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "simple_history",
    "axes",
    "core",
    "access",
    "inventory",
    "planner",
    "accounting",
    "frontend",
    "exports",
    "reports",
    "telemetry",
    "alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # ETag from the body (and 304) for every non-streamed GET: spreadsheets refresh cheaply.
    "django.middleware.http.ConditionalGetMiddleware",
    # Before CSRF (which reads a form body): an upload over its view's limit is a 413, unread.
    "core.upload_limits.UploadLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: inventory history records who made each change.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # With DEBUG on too, a page's 404 is the app's page, not Django's (frontend/middleware.py).
    "frontend.middleware.FriendlyNotFoundMiddleware",
    # A database that went away answers 503 "try again" (config/middleware.py).
    "config.middleware.DatabaseUnavailableMiddleware",
    # Last, as django-axes requires: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out username + address before the password is checked.
    "config.auth.LoginAttemptsBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login rate limiting (django-axes, config/auth.py): 5 failures per username and address
# lock that pair for 15 minutes; a successful login resets the count.
AXES_FAILURE_LIMIT = env.int("FLEETWISE_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("FLEETWISE_LOGIN_LOCKOUT_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# Beside the pair: failures from one address over every username (a sprayed password) lock
# that address at this many within the cool-off (config.auth.LoginAttemptsHandler).
FLEETWISE_LOGIN_ADDRESS_FAILURE_LIMIT = env.int("FLEETWISE_LOGIN_ADDRESS_FAILURE_LIMIT", default=20)
AXES_HANDLER = "config.auth.LoginAttemptsHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "config.auth.lockout_response"
AXES_CLIENT_IP_CALLABLE = "config.auth.client_ip"
# Reverse proxies in front of the app that append to X-Forwarded-For (0: none, use the peer).
FLEETWISE_TRUSTED_PROXY_COUNT = env.int("FLEETWISE_TRUSTED_PROXY_COUNT", default=0)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The embedded default needs no server: a SQLite file under var/.
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'fleetwise.sqlite3'}"),
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL plus a busy timeout lets web, worker and beat share the file; IMMEDIATE transactions
    # take the write lock up front, so a writer waits its turn instead of failing "locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DJANGO_CONN_MAX_AGE", default=60)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# "dashboards": results shared by web and worker processes (the worker precomputes the Usage
# and Costs default views after each rollup refresh). A database table by default (created
# by the accounting migrations); e.g. DASHBOARD_CACHE_URL=redis://host:6379/2 for Redis.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "dashboards": {
        **env.cache("DASHBOARD_CACHE_URL", default="dbcache://fleetwise_dashboard_cache"),
        "TIMEOUT": 24 * 3600,
        "OPTIONS": {"MAX_ENTRIES": 5000},
    },
}
# Called with the refreshed cluster ids after each usage rollup refresh (worker side).
USAGE_ROLLUP_REFRESH_HOOKS = ["frontend.dashboards.usage_selectors.precompute_default_views"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("DJANGO_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "frontend.staticfiles.PlotlyJsFinder",  # plotly.js from the plotly package itself
]
# Serve app static files straight from their folders when no collectstatic ran (dev, tests).
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = env("DJANGO_MEDIA_ROOT", default=str(VAR_DIR / "media"))
MEDIA_URL = "/media/"

# Request bodies: form and JSON fields up to 10 MB in memory (a pasted inventory import is at
# most 5 MB); uploaded files above 2.5 MB go to a temporary file, never into memory. Each import
# has its own explicit limit with a clear message (inventory 5 MB, usage files
# FLEETWISE_USAGE_UPLOAD_MAX_BYTES), and XLSX archives are checked before they are opened.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 2**20
FILE_UPLOAD_MAX_MEMORY_SIZE = int(2.5 * 2**20)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 2000
# Usage files (docs/deployment.md, "Reader and worker limits"): the upload limit of the page
# and the API, then what every text reader enforces while it streams, so a worker's memory
# follows the block size, never the file (one line; one parser block of lines).
FLEETWISE_USAGE_UPLOAD_MAX_BYTES = env.int("FLEETWISE_USAGE_UPLOAD_MAX_BYTES", default=2**30)
FLEETWISE_READER_MAX_LINE_BYTES = env.int("FLEETWISE_READER_MAX_LINE_BYTES", default=16 * 2**20)
FLEETWISE_READER_MAX_BLOCK_BYTES = env.int("FLEETWISE_READER_MAX_BLOCK_BYTES", default=32 * 2**20)
# Bounded work and disk per user (docs/deployment.md, "Per-user limits and file retention"):
# background exports and usage imports one user may have queued or running at once (0: no
# limit; beyond it a 429 with Retry-After), and how long stored files are kept (days).
FLEETWISE_MAX_OPEN_EXPORTS_PER_USER = env.int("FLEETWISE_MAX_OPEN_EXPORTS_PER_USER", default=2)
FLEETWISE_MAX_OPEN_IMPORTS_PER_USER = env.int("FLEETWISE_MAX_OPEN_IMPORTS_PER_USER", default=2)
FLEETWISE_FILE_RETENTION_DAYS = env.float("FLEETWISE_FILE_RETENTION_DAYS", default=30.0)
FLEETWISE_FAILED_FILE_RETENTION_DAYS = env.float(
    "FLEETWISE_FAILED_FILE_RETENTION_DAYS", default=7.0
)
FLEETWISE_DELETED_RETENTION_DAYS = env.float("FLEETWISE_DELETED_RETENTION_DAYS", default=30.0)

# Outbound requests (core/outbound.py; docs/deployment.md, "Outbound requests"): Prometheus
# and any future source reach public addresses; loopback only when allowed here, private
# and internal ranges only inside the listed networks (CIDR); link-local and cloud metadata
# never. One answer is read up to the byte cap.
FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = env.bool("FLEETWISE_OUTBOUND_ALLOW_LOOPBACK", default=False)
FLEETWISE_OUTBOUND_ALLOWED_NETWORKS = env.list("FLEETWISE_OUTBOUND_ALLOWED_NETWORKS", default=[])
FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES = env.int(
    "FLEETWISE_OUTBOUND_MAX_RESPONSE_BYTES", default=128 * 2**20
)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# --- Celery -----------------------------------------------------------------
# Embedded default: kombu's filesystem transport, a folder of message files under var/.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://")
CELERY_BROKER_FOLDER = Path(env("CELERY_BROKER_FOLDER", default=str(VAR_DIR / "broker")))
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_FOLDER / "out"),
        "data_folder_out": str(CELERY_BROKER_FOLDER / "out"),
        "processed_folder": str(CELERY_BROKER_FOLDER / "processed"),
        "store_processed": False,
        "control_folder": str(CELERY_BROKER_FOLDER / "control"),
    }
else:
    # Redelivery after a lost worker (core/jobs/recovery.py): longer than the hard task time
    # limit, so a healthy task is never handed out twice. A short connect timeout: with the
    # broker down a request defers its job (core.jobs.dispatch), never hangs.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("FLEETWISE_BROKER_VISIBILITY_TIMEOUT_S", default=65 * 60),
        "socket_connect_timeout": 2,
    }
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        # kombu's Redis transport, fixed so a worker outlives a broker outage mid-task
        # (config/celery_redis.py, docs/decisions/0006-workers-survive-their-broker.md).
        CELERY_BROKER_TRANSPORT = "config.celery_redis:Transport"
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# No result backend: every job's status and outcome is its job row (core.jobs), including the
# Fleet page's worker check (inventory.PoolTotalsCheck).
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_TIME_LIMIT = 60 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 55 * 60
# Worker limits (docs/deployment.md, "Reader and worker limits"). A prefork child is replaced
# after a task that left it above this resident size (KiB), and caps its address space (MB,
# 0: none) so a runaway task gets a MemoryError, not the host's OOM killer.
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env.int(
    "FLEETWISE_WORKER_MAX_MEMORY_PER_CHILD_KB", default=1024 * 1024
)
FLEETWISE_WORKER_MEMORY_LIMIT_MB = env.int("FLEETWISE_WORKER_MEMORY_LIMIT_MB", default=4096)
# A task whose worker died this many times while running it is failed, not sent again.
FLEETWISE_TASK_MAX_WORKER_DEATHS = env.int("FLEETWISE_TASK_MAX_WORKER_DEATHS", default=2)
# Hard time limit per task kind (seconds); the soft limit, a catchable error the task reports
# on its job row, comes a tenth earlier (at least 30 s). The import keeps the hour the broker's
# visibility timeout is sized for.
TASK_TIME_LIMITS_S = {
    "import": env.int("FLEETWISE_TIME_LIMIT_IMPORT_S", default=60 * 60),
    "analysis": env.int("FLEETWISE_TIME_LIMIT_ANALYSIS_S", default=15 * 60),
    "plan": env.int("FLEETWISE_TIME_LIMIT_PLAN_S", default=10 * 60),
    "report": env.int("FLEETWISE_TIME_LIMIT_REPORT_S", default=15 * 60),
    "export": env.int("FLEETWISE_TIME_LIMIT_EXPORT_S", default=30 * 60),
    "periodic": env.int("FLEETWISE_TIME_LIMIT_PERIODIC_S", default=5 * 60),
}
TASK_KINDS = {
    "accounting.run_import": "import",
    "accounting.refresh_usage_rollups": "import",
    "accounting.run_rollup_refresh": "import",
    "planner.run_analysis": "analysis",
    "planner.analysis_part": "analysis",
    "planner.finalize_analysis": "analysis",
    "planner.compute_plan": "plan",
    "reports.generate_report": "report",
    "reports.deliver_report": "report",
    "exports.build_export": "export",
    "reports.tick": "periodic",
    "config.dispatch_pending": "periodic",
    "config.recover_stalled": "periodic",
    "core.worker_pulse": "periodic",
    "core.apply_retention": "periodic",
    "inventory.recompute_pool_totals": "periodic",
    "telemetry.run_fetch": "import",
    "telemetry.fetch_yesterday": "periodic",
    "accounting.pull_slurmrestd": "import",
    "accounting.pull_due_slurmrestd": "periodic",
    "telemetry.fetch_kubernetes": "import",
    "telemetry.fetch_due_kubernetes": "periodic",
}
CELERY_TASK_ANNOTATIONS = {
    name: {
        "time_limit": TASK_TIME_LIMITS_S[kind],
        "soft_time_limit": TASK_TIME_LIMITS_S[kind] - max(30, TASK_TIME_LIMITS_S[kind] // 10),
    }
    for name, kind in TASK_KINDS.items()
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Jobs queued while the broker was unreachable go out once it is back (core/jobs/dispatch.py).
CELERY_BEAT_SCHEDULE = {
    "dispatch-deferred-jobs": {"task": "config.dispatch_pending", "schedule": 60.0},
    # Jobs whose worker died (stopped beating) are sent again (core/jobs/recovery.py).
    "recover-stalled-jobs": {"task": "config.recover_stalled", "schedule": 60.0},
    # Each enabled Prometheus source: the last two days' GPU telemetry (docs/telemetry.md).
    "telemetry-daily-fetch": {"task": "telemetry.fetch_yesterday", "schedule": 24 * 3600.0},
    # Live Slurm sources whose interval (or back-off) has passed (docs/usage-import.md).
    "slurmrestd-pulls": {"task": "accounting.pull_due_slurmrestd", "schedule": 60.0},
    # Kubernetes allocation sources whose interval (or back-off) has passed.
    "kubernetes-fetches": {"task": "telemetry.fetch_due_kubernetes", "schedule": 60.0},
    # Alert rules: hourly, and after each usage import and analysis (alerts/signals.py).
    "evaluate-alerts": {"task": "alerts.evaluate_alerts", "schedule": 3600.0},
    # Files, and deleted clusters and pools, past their retention period (core/retention/).
    "apply-retention": {"task": "core.apply_retention", "schedule": 3600.0},
}
# A worker proves it consumes: it runs the pulse beat sends (core/jobs/pulse.py); /healthz/worker/
# answers 503 once no worker ran one for FLEETWISE_WORKER_STALE_AFTER_S. An unconsumed pulse
# expires at the next one, so a stopped worker does not find a backlog of them.
FLEETWISE_WORKER_PULSE_S = env.float("FLEETWISE_WORKER_PULSE_S", default=60.0)
FLEETWISE_WORKER_STALE_AFTER_S = env.float("FLEETWISE_WORKER_STALE_AFTER_S", default=180.0)
CELERY_BEAT_SCHEDULE["worker-pulse"] = {
    "task": "core.worker_pulse",
    "schedule": FLEETWISE_WORKER_PULSE_S,
    "options": {"expires": FLEETWISE_WORKER_PULSE_S},
}
CELERY_IMPORTS = [
    "core.jobs.dispatch",
    "core.jobs.recovery",
    "core.jobs.pulse",
    "core.retention.tasks",
]
# One queue name for web, workers and beat; a test or a dedicated worker pool may use another.
CELERY_TASK_DEFAULT_QUEUE = env("FLEETWISE_CELERY_QUEUE", default="celery")
# A running job refreshes its heartbeat this often; one silent for longer than
# FLEETWISE_STALLED_AFTER_S is taken for dead and re-sent (idempotent, so a false alarm only
# costs a duplicate run that writes nothing new).
FLEETWISE_HEARTBEAT_INTERVAL_S = env.float("FLEETWISE_HEARTBEAT_INTERVAL_S", default=30.0)
FLEETWISE_STALLED_AFTER_S = env.float("FLEETWISE_STALLED_AFTER_S", default=300.0)
# SQLite only: heartbeat files (a usage import holds SQLite's one write lock for its file).
FLEETWISE_HEARTBEAT_DIR = env("FLEETWISE_HEARTBEAT_DIR", default=str(VAR_DIR / "heartbeats"))

# --- E-mail (scheduled reports) -------------------------------------------------
EMAIL_BACKEND = env("DJANGO_EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("DJANGO_EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("DJANGO_EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("DJANGO_EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("DJANGO_EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("DJANGO_EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("DJANGO_EMAIL_USE_SSL", default=False)
# A hung SMTP server must fail the send (and be retried), not block a worker for an hour.
EMAIL_TIMEOUT = env.int("DJANGO_EMAIL_TIMEOUT", default=30)
DEFAULT_FROM_EMAIL = env("DJANGO_DEFAULT_FROM_EMAIL", default="fleetwise@localhost")
# Links in report e-mails point here.
FLEETWISE_BASE_URL = env("FLEETWISE_BASE_URL", default="http://127.0.0.1:8000")
# Failed deliveries retry after base × 2^attempt seconds, up to this many times.
REPORTS_DELIVERY_MAX_RETRIES = env.int("FLEETWISE_REPORTS_DELIVERY_MAX_RETRIES", default=5)
REPORTS_DELIVERY_RETRY_BASE_S = env.float("FLEETWISE_REPORTS_DELIVERY_RETRY_BASE_S", default=60.0)

# --- REST framework -----------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first so an anonymous API client gets 401 with a WWW-Authenticate header.
        "access.tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["access.permissions.RolePermission"],
    # JSON numbers beyond a double (1e400) are a 400, not infinity (core/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.FiniteJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Every endpoint answers JSON, CSV and XLSX (?format= or Accept); see docs/export.md.
    "DEFAULT_RENDERER_CLASSES": [
        "core.tabular.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
        "core.tabular.renderers.CSVRenderer",
        "core.tabular.renderers.XLSXRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
        "core.tabular.filters.FieldSelectionFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "config.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "config.schema.ExportAutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Fleetwise API",
    "DESCRIPTION": "Inventory, efficiency analyses, accounting and capacity planning "
    "for AI compute fleets.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Two choice sets share the field names scope and status: name each (keeps the old names).
    "ENUM_NAME_OVERRIDES": {
        "ScopeEnum": "planner.models.ANALYSIS_SCOPES",
        "StatusEnum": "core.jobs.status.JobStatus",
        "ReportScopeEnum": "reports.models.REPORT_SCOPES",
        "ReportStatusEnum": "reports.models.ReportStatus",
        "UsageImportKindEnum": "accounting.models.ImportKind",
        "TelemetryFetchKindEnum": "telemetry.models.FetchKind",
        "StatePrecisionEnum": "engine.memory.STATE_PRECISIONS",
    },
}

# --- Spreadsheet exports (docs/export.md) ----------------------------------------
# A direct XLSX above this many rows is refused with a pointer to a background export job.
EXPORT_XLSX_MAX_ROWS = env.int("FLEETWISE_EXPORT_XLSX_MAX_ROWS", default=50_000)
EXPORT_TOKEN_MAX_DAYS = env.int("FLEETWISE_EXPORT_TOKEN_MAX_DAYS", default=365)
# Requests per token (a spreadsheet link) before 429; DRF rate syntax.
EXPORT_TOKEN_RATE = env("FLEETWISE_EXPORT_TOKEN_RATE", default="60/min")

# Request lines name export-link tokens: both request loggers redact them (core/logredact.py).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_tokens": {"()": "core.logredact.RedactTokensFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        # Every app logger writes here: URLs with credentials are redacted too (core.logredact).
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact_tokens"],
        },
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server"},
    },
    "loggers": {
        "django.server": {
            "handlers": ["django.server"],
            "level": "INFO",
            "filters": ["redact_tokens"],
            "propagate": False,
        },
        "django.request": {"filters": ["redact_tokens"]},
    },
    "root": {"handlers": ["console"], "level": env("DJANGO_LOG_LEVEL", default="INFO")},
}
