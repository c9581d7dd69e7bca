"""arig inside Ray Serve replicas: the model and batching of ``examples/serve``, one device per replica.

``replica.py`` is a replica's logic without Ray (what ``replica_check`` drives
on a GPU machine); ``deployment.py`` wraps it in a Serve deployment whose
``check_health`` fails once the device is lost or hung, so Serve replaces the
replica; ``loadtest.py`` drives it over Serve's HTTP proxy with an injected
loss and hang.  See ``examples/ray_serve/README.md``.
"""
