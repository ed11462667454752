"""Login page. The lockout (per client address and per account) is the authentication backend's,
the same for every login door (memoryhub.web.login_throttle)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views


class ThrottledLoginView(auth_views.LoginView):
    template_name = "memoryhub/login.html"
