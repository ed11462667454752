from django.contrib import admin

from memoryhub.admin import ReadOnlyAdmin
from triggers import models as m

admin.site.register(m.ContextPolicy)
admin.site.register(m.TriggerDecision, ReadOnlyAdmin)
