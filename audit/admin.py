from django.contrib import admin

from audit import models as m
from memoryhub.admin import ReadOnlyAdmin

for model in (m.AuditEntry, m.Purge, m.Investigation, m.AuditChainHead, m.Payload, m.SummaryComment):
    admin.site.register(model, ReadOnlyAdmin)
admin.site.register(m.RetentionPolicy)
