"""Signals the inventory owns, for the apps above (docs/architecture.md, "Talking upwards").

Each is sent inside the transaction that changes the object, with ``instance`` and
``cluster_id`` (the cluster the object is or belongs to):

* ``inventory_hidden``: a cluster or pool was deleted (soft: hidden, restorable);
* ``inventory_restored``: it was restored (its usage counts again);
* ``inventory_purging``: it is about to be deleted for good (inventory.deletion's purge).
"""

from django.dispatch import Signal

inventory_hidden = Signal()
inventory_restored = Signal()
inventory_purging = Signal()
