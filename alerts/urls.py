from django.urls import path

from alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.alert_list, name="list"),
    path("events/<int:pk>/acknowledge/", views.acknowledge, name="acknowledge"),
]
