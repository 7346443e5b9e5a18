"""``TeamSettings``: the service's configuration, from the environment and a TOML file.

Every field can be set as ``AGENTICA_TEAM_<FIELD>`` (upper case) or in the file given by
``agentica serve --config team.toml`` (or ``$AGENTICA_TEAM_CONFIG``); the environment wins over
the file, command-line flags over both. The table in ``docs/team.md`` lists every field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["TeamSettings", "default_data_dir"]


def default_data_dir() -> Path:
    """``$AGENTICA_HOME/team``, else ``$XDG_DATA_HOME/agentica/team``, else
    ``~/.local/share/agentica/team``."""
    home = os.environ.get("AGENTICA_HOME")
    if home:
        return Path(home).expanduser() / "team"
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "agentica" / "team"


class TeamSettings(BaseSettings):
    """The team service's settings (see the module docstring for where they come from)."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTICA_TEAM_", extra="forbid", validate_default=True
    )

    database_url: str = Field(
        default="",
        description="SQLAlchemy URL; empty: a SQLite file `team.db` in the data directory. "
        "`postgresql://user@host/db` selects PostgreSQL.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the default SQLite database lives (`$AGENTICA_HOME/team`, else "
        "`~/.local/share/agentica/team`).",
    )
    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port to listen on.")
    public_url: str = Field(
        default="",
        description="The URL students use to reach the server (for `agentica connect` lines); "
        "empty: http://HOST:PORT.",
    )
    model: str = Field(
        default="local",
        description="The model of a course that has none configured: a model string "
        "(`local`, `openai:gpt-4o-mini`, `deepseek:deepseek-chat`, ...).",
    )
    model_base_url: str = Field(
        default="", description="OpenAI-compatible API root for `model` (optional)."
    )
    model_api_key: SecretStr = Field(
        default=SecretStr(""), description="Provider key for `model`; never leaves the server."
    )
    secret_key: SecretStr = Field(
        default=SecretStr(""),
        description="Encrypts provider keys in the database (a Fernet key); empty: one made on "
        "first start in `DATA_DIR/secret.key`. Every worker must use the same one; keep it with "
        "the database's backups.",
    )
    max_output_tokens: int = Field(
        default=1024,
        ge=1,
        description="Output tokens a model call may use when the caller sets no `max_tokens`; "
        "the budget reserves this much.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest request body accepted (bytes)."
    )
    token_ttl_days: int = Field(
        default=180, ge=1, description="Lifetime of a personal API token (days)."
    )
    web_session_hours: int = Field(
        default=12, ge=1, description="Lifetime of a browser login (hours)."
    )
    login_attempts_per_minute: int = Field(
        default=10, ge=1, description="Failed logins per account and per client address a minute."
    )
    secure_cookies: bool = Field(
        default=False, description="Mark cookies `Secure` (set when served over HTTPS)."
    )
    agent_runtime: Literal["serial", "batch", "lanes"] = Field(
        default="serial",
        description="How agent sessions handle their events: `serial` (one message at a time), "
        "`batch` (the messages that arrived meanwhile together) or `lanes` (each piece of work "
        "a lane; messages routed, interruptible, commands run as operations).",
    )
    server_commands: bool = Field(
        default=False,
        description="Let agents run commands on this server, each session in "
        "`DATA_DIR/workspaces/SESSION` inside bubblewrap. Off: the server runs nothing of a "
        "student's (commands need the student's own computer).",
    )
    redis_url: str = Field(
        default="",
        description="Redis for several workers on one PostgreSQL database "
        "(`redis://host:6379/0`): the event bus between them and the lease that runs each "
        "session's agent on exactly one worker. Empty: one process, events in memory.",
    )
    redis_prefix: str = Field(
        default="agentica",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Prefix of the Redis keys (several services can share one Redis).",
    )
    lease_seconds: float = Field(
        default=3.0,
        ge=0.5,
        le=600,
        description="How long a worker's hold on a session lasts unless renewed (every third "
        "of it): after a worker dies, its sessions move to another within about this long.",
    )
    web_dir: Path | None = Field(
        default=None,
        description="The built web UI to serve at `/` (empty: the one `make web` builds into the "
        "package, `agentica_team/web_dist`).",
    )
    reservation_timeout: float = Field(
        default=900.0,
        gt=0,
        description="Seconds after which an unsettled budget reservation (a crashed call) is "
        "released.",
    )

    otlp_endpoint: str = Field(
        default="",
        description="OpenTelemetry collector to send traces to over OTLP/HTTP "
        "(`http://host:4318/v1/traces`): a span per session event and per operation, the "
        "agents' runs under them. Empty: no tracing.",
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_endpoint(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"otlp_endpoint must be an http(s) URL, got {value[:40]!r}")
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        for plain, driver in (
            ("postgresql://", "postgresql+asyncpg://"),
            ("postgres://", "postgresql+asyncpg://"),
            ("sqlite://", "sqlite+aiosqlite://"),
        ):
            if value.startswith(plain):
                return driver + value.removeprefix(plain)
        if value and not value.startswith(("postgresql+asyncpg://", "sqlite+aiosqlite://")):
            raise ValueError(
                f"database_url must start with sqlite:// or postgresql://, got {value[:40]!r}"
            )
        return value

    @property
    def database(self) -> str:
        """The database URL to use (the SQLite default filled in)."""
        return self.database_url or f"sqlite+aiosqlite:///{self.data_dir / 'team.db'}"

    @property
    def base_url(self) -> str:
        """The URL students use to reach the server."""
        return self.public_url.rstrip("/") or f"http://{self.host}:{self.port}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)

    @classmethod
    def load(cls, config: str | Path | None = None, **overrides: Any) -> TeamSettings:
        """Settings from ``overrides`` (which win), the environment and ``config``, a TOML file
        (default ``$AGENTICA_TEAM_CONFIG``); a missing file is a ``BadRequest``."""
        config = config or os.environ.get("AGENTICA_TEAM_CONFIG") or None
        if config is None:
            return cls(**overrides)
        path = Path(config).expanduser()
        if not path.is_file():
            from agentica_team.errors import BadRequest

            raise BadRequest(f"the config file {str(path)!r} does not exist")
        configured = type(cls.__name__, (cls,), {
            "model_config": SettingsConfigDict(**{**cls.model_config, "toml_file": path}),
            "__module__": cls.__module__,
        })  # fmt: skip
        loaded: TeamSettings = configured(**overrides)
        return loaded
