"""Position ids, one file per kind of input.

- ``sequence``: checked positions of a sequence, and the ids of padding, packing
  (segments, ``cu_seqlens``) and the fairseq numbering;
- ``grid``: the coordinates of image and video patches;
- ``multimodal``: the ``(t, h, w)`` ids of multimodal sequences, as Qwen-VL computes them;
- ``timestamps``: the real rotary coordinates of audio frames from their timestamps
  (MusicFlamingo's rotary time embedding).
"""
