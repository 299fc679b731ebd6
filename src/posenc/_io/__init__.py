"""Files in and out, shared by the command line and the explorer (neither owns them).

Every reader here treats its file as possibly hostile: sizes are checked before anything is
allocated, nothing is unpickled, and an unusable file is one line that names it.

- ``files``: :class:`~posenc._io.files.FileError` and the check that a path can be opened;
- ``sizes``: the default limit on what is read (a quarter of physical memory) and how a size
  is written in a message;
- ``tables``: one 2-D table from a ``.npy``, ``.npz``, ``.safetensors`` or PyTorch file;
- ``config_file``: the JSON object of a ``config.json``;
- ``plan_json``: a RoPE plan and an attention-bias plan as plain JSON data (``posenc plan
  --json``, the explorer's plan panel).
"""
