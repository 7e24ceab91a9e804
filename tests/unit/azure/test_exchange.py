"""The ACR token exchange's lines when the network fails, through its transport seam (the Send
that runtime/http.exchange takes): each says what failed and what to check."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping

import pytest

from credprovider.azure.exchange import exchange_for_refresh_token
from credprovider.errors import ProviderError
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.http import HttpError, HttpResponse
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context

CHALLENGE = 'Bearer realm="https://myreg.azurecr.io/oauth2/token",service="myreg.azurecr.io"'


def test_an_exchange_that_cannot_be_reached_says_what_to_check() -> None:
    """The registry's challenge answered, its exchange did not (the exchange's own timeout, three
    attempts): the line named only the URL, while the challenge's said what to check. The fault
    suite met this only when that timeout and the plugin's deadline fell together."""
    posts: list[str] = []

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> HttpResponse:
        if method == "GET":
            challenge = (("Www-Authenticate", CHALLENGE),)
            return HttpResponse(401, {"www-authenticate": CHALLENGE}, b"", challenge)
        posts.append(url)
        raise HttpError("no whole answer within 10s")

    ctx = Context(Deadline(30), Logger("t", 0, io.StringIO()), {}, time.time)
    with pytest.raises(ProviderError) as raised:
        exchange_for_refresh_token("myreg.azurecr.io", "aad-token", "", ctx, send=send)
    said = str(raised.value)
    assert said.startswith("could not reach https://myreg.azurecr.io/oauth2/exchange: ")
    assert "no whole answer within 10s" in said
    assert "; check that myreg.azurecr.io is reachable from this node" in said
    assert posts == ["https://myreg.azurecr.io/oauth2/exchange"] * 3
