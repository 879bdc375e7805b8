"""Shared building blocks every app may use: the job framework (core.jobs) and, beside it,
the spreadsheet stack. Below every app in the layers; names no app model."""
