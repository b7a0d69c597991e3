"""The typed models of the settings sections whose readers sit above
``ragkit.settings``: ``[index]`` (read by the pipeline) and ``[server]`` (read
by ``ragkit serve``). They live here, under both, so that loading settings
loads neither the index side nor the server. Sections read by lower layers
live with their reader: ``[lock]`` in ``ragkit.core.lock``, ``[loaders]`` in
``ragkit.loaders.limits``. Plain pydantic: nothing here imports a reader."""
