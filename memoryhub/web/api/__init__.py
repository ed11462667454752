"""REST API v1 (DRF). One module per feature area; memoryhub/web/api/urls.py collects them."""
