"""Signing secrets: values, stop dates, rotation and per-organization lookup (spec §5.2).

The rule, from spec §5.2: the shared secret is configured on the endpoint and never
transmitted. A receiver may accept up to two secrets while rotating (the new one is
tried first, the old one only until a chosen stop date), and accounts under umbrella
management each have their own organization ID (``o``) and their own secret.

* :class:`Secret` holds the bytes (a ``str`` is UTF-8 encoded) and an optional stop
  date; its ``repr`` never shows the value.
* A *secrets configuration* is one of: a secret; a sequence of secrets (newest first,
  the same for every organization); a mapping ``organization ID -> secrets``; or a
  callable ``organization ID -> secrets | None``. :func:`as_resolver` turns any of
  them into a :class:`SecretResolver`.
* :func:`generate_secret` makes a random secret of 256 (default) to 512 bits (spec §5.2).
"""

from __future__ import annotations

import math
import secrets as _random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeAlias, cast

from ._exceptions import ConfigurationError

__all__ = [
    "Secret",
    "SecretLike",
    "SecretResolver",
    "SecretsConfig",
    "as_resolver",
    "generate_secret",
]


def signable_organization(organization_id: object) -> bool:
    """Whether ``organization_id`` can be a header's ``o``: a non-empty printable ASCII
    ``str`` without ``,`` (the comma ends the pair, spec §5.2)."""
    return (
        isinstance(organization_id, str)
        and bool(organization_id)
        and "," not in organization_id
        and organization_id.isascii()
        and organization_id.isprintable()
    )


def check_organization_id(organization_id: str) -> None:
    """Check an organization ID as the ``o`` of a signature (spec §5.2) can carry it,
    for what signs later (an emulator's event or endpoint, a test ``Signer``): refused
    when made rather than at the first signature.

    Raises:
        ConfigurationError: Not a string, empty, not printable ASCII, or holding ``,``
            (the rules of :func:`service_webhooks.sign`).
    """
    if not signable_organization(organization_id):
        raise ConfigurationError(
            f"organization_id must be non-empty printable ASCII, without ',', "
            f"got {organization_id!r}"
        )


_YEAR_10000 = 253_402_300_800
"""10000-01-01T00:00:00Z in Unix seconds: a stop date given as a number must be earlier,
as any ``datetime`` is. A finite number from it on is milliseconds or a smaller unit
(``time.time() * 1000``, JavaScript's ``Date.now()``: about 1.7e12 today), which read
as seconds would keep a rotated-out secret verifying for tens of thousands of years."""


def _stop_time(not_after: object) -> float | None:
    """A stop date as Unix seconds (``None``: never).

    Raises:
        ConfigurationError: A naive ``datetime``, NaN, a number out of the range of a
            ``float``, a finite number from :data:`_YEAR_10000` on (milliseconds),
            or neither a ``datetime`` nor a number (``"2026"`` would be read as 2026 s
            after 1970: a secret that never verified).
    """
    if not_after is None:
        return None
    if isinstance(not_after, datetime):
        if not_after.tzinfo is None:
            raise ConfigurationError(
                "Secret(not_after=...) needs an aware datetime, such as "
                "datetime(2027, 6, 1, tzinfo=UTC): a naive one has no defined instant"
            )
        return not_after.timestamp()
    if isinstance(not_after, bool) or not isinstance(not_after, (int, float)):
        raise ConfigurationError(
            "Secret(not_after=...) must be an aware datetime or Unix seconds (int or "
            f"float), not {type(not_after).__name__}"
        )
    if isinstance(not_after, float) and math.isnan(not_after):
        raise ConfigurationError(
            "Secret(not_after=...) must be an aware datetime or Unix seconds (int or "
            "float), not float NaN"
        )
    try:
        seconds = float(not_after)
    except OverflowError:
        raise ConfigurationError(
            "Secret(not_after=...) is out of range: Unix seconds, such as time.time() + 90000"
        ) from None
    if _YEAR_10000 <= seconds < math.inf:  # inf: never, as None
        raise ConfigurationError(
            f"Secret(not_after={not_after!r}) is past year 9999 as Unix seconds (above "
            f"{_YEAR_10000 - 1}): milliseconds, such as time.time() * 1000 or "
            "JavaScript's Date.now()? not_after is Unix seconds: divide by 1000 "
            "(not_after / 1000), or pass an aware datetime"
        )
    return seconds


class Secret:
    """One signing secret, optionally with a stop date.

    Args:
        value: The shared secret exactly as configured in the service's webhook
            settings; ``str`` is UTF-8 encoded, ``bytes`` used as is. Must not be empty.
            Kept byte for byte, whitespace included: a receiver's configuration
            refuses whitespace that cannot be meant (see :func:`configured_secret`).
        not_after: When the secret stops verifying: an aware ``datetime`` or Unix
            seconds (``int`` or ``float``, before year 10000: at most 253402300799
            and a fraction). ``None`` (the default) means it never expires. Used for the
            old secret during rotation (spec §5.2).

    Raises:
        ConfigurationError: ``value`` is empty or of the wrong type, a ``str`` that
            cannot be UTF-8 encoded (a lone surrogate: a byte that was not UTF-8 in an
            environment variable or a command-line argument), or ``not_after``
            is a naive ``datetime``, NaN, out of the range of a ``float``, a finite
            number later than year 9999 in seconds (milliseconds, such as
            ``time.time() * 1000`` or JavaScript's ``Date.now()``: a secret that would
            never stop verifying), or neither a ``datetime`` nor a number. The message
            never shows the value.
    """

    __slots__ = ("not_after", "value")

    value: bytes
    not_after: float | None

    def __init__(self, value: str | bytes, *, not_after: datetime | float | None = None) -> None:
        if isinstance(value, str):
            try:
                value = value.encode("utf-8")
            except UnicodeEncodeError:  # its message would quote a character and its place
                raise ConfigurationError(
                    "a str secret must be valid Unicode: this one holds a byte that was not "
                    "UTF-8 where it was read (an environment variable, a command-line "
                    "argument or a file in another encoding, which Python keeps as a lone "
                    "surrogate); pass the exact bytes (os.environb, open(path, 'rb')) "
                    "or the text in UTF-8"
                ) from None
        if not isinstance(value, bytes) or not value:
            raise ConfigurationError("a secret must be a non-empty str or bytes")
        self.value = value
        self.not_after = _stop_time(not_after)

    def is_active(self, now: float) -> bool:
        """Whether the secret still verifies at ``now`` (Unix seconds)."""
        return self.not_after is None or now <= self.not_after

    def __repr__(self) -> str:
        size = len(getattr(self, "value", b""))
        return f"Secret('<redacted {size} bytes>', not_after={getattr(self, 'not_after', None)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return _random.compare_digest(self.value, other.value) and self.not_after == other.not_after

    def __hash__(self) -> int:
        return hash((self.value, self.not_after))


SecretLike: TypeAlias = str | bytes | Secret
"""A single secret in any accepted form."""

SecretsConfig: TypeAlias = (
    SecretLike
    | Sequence[SecretLike]
    | Mapping[str, SecretLike | Sequence[SecretLike]]
    | Callable[[str], SecretLike | Sequence[SecretLike] | None]
)
"""Every form a receiver's ``secrets=`` argument accepts (see the module docstring)."""


class SecretResolver(Protocol):
    """Finds the secrets that may have signed a delivery from one organization.

    Called once per delivery with the header's ``o`` value. Returns the accepted
    secrets, newest first, or ``None`` when the organization is unknown (the
    delivery is then answered 401, reason ``unknown_organization``). Expired
    secrets may be returned; the verifier skips them. Must be thread-safe.
    """

    def __call__(self, organization_id: str, /) -> Sequence[Secret] | None: ...


def configured_secret(value: object) -> Secret:
    """A secret given to a receiver (``secrets=``, a ``secrets=`` callable's answer, the
    CLI's ``--secret``), refused when it could never be the service's: configuration
    mistakes that would otherwise answer every delivery 401.

    Args:
        value: A ``str``, ``bytes`` or :class:`Secret`.

    Returns:
        The :class:`Secret` (``value`` itself when it is one).

    Raises:
        ConfigurationError: Not a ``str``, ``bytes`` or :class:`Secret`; empty;
            whitespace only; or a ``str`` that starts or ends with whitespace (the
            newline of a file or an environment variable): pass ``bytes`` or a
            :class:`Secret` when that whitespace is part of the secret. The message
            never shows the value.
    """
    if isinstance(value, str) and value.strip() and value != value.strip():
        raise ConfigurationError(
            "a secret must not start or end with whitespace (a newline read from a file "
            "or an environment variable?): strip it, or pass bytes or Secret(...) if the "
            "whitespace is part of the secret"
        )
    # Secret() itself refuses anything but a non-empty str or bytes
    secret = value if isinstance(value, Secret) else Secret(cast("str | bytes", value))
    if secret.value.isspace():
        raise ConfigurationError("a secret must not be whitespace only")
    return secret


def to_secrets(value: SecretLike | Sequence[SecretLike]) -> tuple[Secret, ...]:
    """One secret or a sequence of them as :class:`Secret` objects, newest first.

    Raises:
        ConfigurationError: A value :func:`configured_secret` refuses, an empty
            sequence, or something else than a secret or a sequence of them.
    """
    if isinstance(value, (str, bytes, Secret)):
        value = [value]
    if not isinstance(value, Sequence):
        raise ConfigurationError(f"unsupported secrets value: {type(value).__name__}")
    items = tuple(configured_secret(v) for v in value)
    if not items:
        raise ConfigurationError("at least one secret is required")
    return items


class _Static:
    __slots__ = ("secrets",)
    # read by the receiver: a lookup that never blocks is called on the event loop
    # under aprocess (a callable's may block, so it runs in a worker thread)
    blocking = False

    def __init__(self, secrets: tuple[Secret, ...]) -> None:
        self.secrets = secrets  # the receiver uses them without a call per delivery

    def __call__(self, organization_id: str, /) -> Sequence[Secret]:
        return self.secrets

    def __repr__(self) -> str:
        return f"StaticSecrets({len(self.secrets)} secrets)"


class _PerOrganization:
    __slots__ = ("_table",)
    blocking = False  # a dict lookup (see _Static)

    def __init__(self, table: dict[str, tuple[Secret, ...]]) -> None:
        self._table = table

    def __call__(self, organization_id: str, /) -> Sequence[Secret] | None:
        return self._table.get(organization_id)

    def __repr__(self) -> str:
        return f"OrganizationSecrets(organizations={sorted(self._table)!r})"


def retired_secrets(resolver: SecretResolver, now: float) -> list[tuple[str | None, float]]:
    """The secrets of a fixed configuration (one set, or one per organization) whose
    stop date is already past at ``now``: they verify no delivery (the rotation they
    were kept for is over). Each as ``(organization ID or None, not_after)``, for a
    warning when the receiver is built; a callable's secrets are not known then."""
    if isinstance(resolver, _Static):
        groups: list[tuple[str | None, tuple[Secret, ...]]] = [(None, resolver.secrets)]
    elif isinstance(resolver, _PerOrganization):
        groups = [*resolver._table.items()]
    else:
        return []
    return [
        (organization_id, secret.not_after)
        for organization_id, secrets in groups
        for secret in secrets
        if secret.not_after is not None and secret.not_after < now
    ]


class _Callable:
    __slots__ = ("_function",)

    blocking = True  # the user's function may do I/O: aprocess calls it in a worker thread

    def __init__(self, function: Callable[[str], SecretLike | Sequence[SecretLike] | None]):
        self._function = function

    def __call__(self, organization_id: str, /) -> Sequence[Secret] | None:
        found = self._function(organization_id)
        if found is None:
            return None
        return to_secrets(found)

    def __repr__(self) -> str:
        # never the callable's repr: a partial or a closure may hold secrets
        name = getattr(self._function, "__qualname__", type(self._function).__name__)
        return f"CallableSecrets(<{name}>)"


def as_resolver(config: SecretsConfig) -> SecretResolver:
    """Turn any accepted secrets configuration into a :class:`SecretResolver`.

    Args:
        config: A secret (``str``, ``bytes`` or :class:`Secret`), a sequence of them
            (newest first), a mapping from organization ID to either, or a callable
            taking the organization ID and returning either or ``None``.

    Returns:
        A resolver. Static forms are validated and normalised once, here.

    Raises:
        ConfigurationError: A secret :class:`Secret` refuses (empty, whitespace only,
            a ``str`` with whitespace around it), an empty sequence or mapping, a value
            of an unsupported type, a mapping key no signature's ``o`` can be
            (neither a ``str`` nor an ``int``, such as ``bytes``; empty, not printable
            ASCII, or holding ``,``), or a callable that is
            ``async def`` or cannot take the organization ID as its one argument.
    """
    if isinstance(config, (str, bytes, Secret)):
        return _Static(to_secrets(config))
    if isinstance(config, Mapping):
        if not config:
            raise ConfigurationError("the organization -> secrets mapping is empty")
        table = {_organization_key(org): to_secrets(value) for org, value in config.items()}
        for organization_id in table:
            if not signable_organization(organization_id):  # no header's o is ever it
                raise ConfigurationError(
                    f"organization ID {organization_id[:40]!r} can never match a delivery: "
                    "an o is non-empty printable ASCII without ',' (spec §5.2)"
                )
        return _PerOrganization(table)
    if isinstance(config, Sequence):
        return _Static(to_secrets(config))
    if callable(config):
        from ._dispatch import check_plain_callable  # the dispatcher's own check, shared

        check_plain_callable(config, "secrets", "secrets(organization_id) -> secrets or None", 1)
        return _Callable(config)
    raise ConfigurationError(f"unsupported secrets configuration: {type(config).__name__}")


def _organization_key(key: object) -> str:
    """A mapping key as the organization ID it names: a ``str``, or an ``int`` as its
    text (a YAML or JSON loader's numeric ID).

    Raises:
        ConfigurationError: Any other key, whose text no header's ``o`` would ever be:
            ``bytes`` (``b'o-1'``), ``None``, a ``bool`` or a ``float``.
    """
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    hint = ": decode it (key.decode())" if isinstance(key, bytes) else ""
    raise ConfigurationError(
        f"an organization ID (a key of the secrets mapping) must be a str, not "
        f"{type(key).__name__}{hint}: it is compared with the header's o, a str"
    )


def generate_secret(bits: int = 256) -> str:
    """Return a new random secret of ``bits`` bits as URL-safe base64 text.

    Spec §5.2 recommends a random secret of 256 to 512 bits, different per endpoint
    and per account. Paste the result into the service's webhook settings and into
    the receiver's configuration (``service-webhooks secret new`` prints one).

    Args:
        bits: 256 (the default: 43 characters) to 512 (86 characters), a multiple
            of 8.

    Raises:
        ConfigurationError: ``bits`` is not an ``int`` from 256 to 512 divisible by 8.
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or not 256 <= bits <= 512 or bits % 8:
        raise ConfigurationError(
            f"bits must be an int from 256 to 512, a multiple of 8 (spec §5.2), not {bits!r}"
        )
    return _random.token_urlsafe(bits // 8)
