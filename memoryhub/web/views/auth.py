"""Login with a lockout per client address and per account, shared by every web process."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from memoryhub.web.login_throttle import take_login_attempt


class ThrottledLoginView(auth_views.LoginView):
    template_name = "memoryhub/login.html"

    def post(self, request, *args, **kwargs):
        refusal = take_login_attempt(request, request.POST.get("username", ""))
        if refusal is not None:
            response = HttpResponse(
                f"Too many login attempts. Try again in {refusal.retry_after} seconds.",
                status=429,
                content_type="text/plain",
            )
            response["Retry-After"] = str(refusal.retry_after)
            return response
        return super().post(request, *args, **kwargs)
