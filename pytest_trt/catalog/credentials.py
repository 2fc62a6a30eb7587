"""Credentials in an MLflow tracking URI: kept out of everything stored or printed.

``http://user:password@host:5000`` is stored and shown as ``http://host:5000``
(the key of the catalog's ``pushes`` and ``registrations`` rows); the user and
password reach MLflow only through its basic-auth variables
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``, set for the call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit, urlunsplit

#: MLflow's basic-auth variables: credentials given in a tracking URI travel only through these
USERNAME_ENV, PASSWORD_ENV = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"


@dataclass(frozen=True)
class TrackingUri:
    """A tracking URI split into what may be shown and stored (``redacted``) and the credentials it held."""

    redacted: str
    username: str | None = None
    password: str | None = None
    #: ``user:password@`` as written in the URI: what :meth:`scrub` removes from text first
    userinfo: str = ""
    #: the password as written in the URI and percent-decoded: what :meth:`scrub` then replaces
    secrets: tuple[str, ...] = ()

    def scrub(self, text: str) -> str:
        """``text`` without the URI's ``user:password@`` and with the password (any spelling) as ``***``."""
        if self.userinfo:
            text = text.replace(self.userinfo, "")
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def env(self) -> dict[str, str]:
        """MLflow's basic-auth variables for these credentials."""
        out = {USERNAME_ENV: self.username, PASSWORD_ENV: self.password}
        return {k: v for k, v in out.items() if v is not None}


def split_credentials(uri: str) -> TrackingUri:
    """``http://user:pw@host:5000/x`` -> ``http://host:5000/x`` plus the (percent-decoded) user and password."""
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unclosed IPv6 bracket: keep nothing between "//" and the last "@" of the host
        redacted = re.sub(r"//[^/?#]*@", "//", uri)
        return TrackingUri(redacted, secrets=(uri,) if redacted != uri else ())
    if "@" not in parts.netloc:
        return TrackingUri(uri)
    userinfo, _, host = parts.netloc.rpartition("@")
    user, sep, raw = userinfo.partition(":")
    password = unquote(raw) if sep else None
    spellings = {raw, password or "", quote(password or "", safe=""), quote(password or "")} - {""}
    return TrackingUri(urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)),
                       unquote(user) if user or sep else None, password, userinfo + "@",
                       tuple(sorted(spellings, key=len, reverse=True)))


def redact(uri: str) -> str:
    """``uri`` without its ``user:password@`` part: the form that is printed and stored."""
    return split_credentials(uri).redacted
