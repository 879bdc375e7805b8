"""Import steps beside :mod:`accounting.services`: sreport storage, checks and previews."""
