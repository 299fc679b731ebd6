"""Attention biases: positions acting on the attention scores instead of the embeddings.

One module per concept: :mod:`.positions` (query/key positions, relative positions ``key −
query``), :mod:`.alibi` (slopes and the dense ALiBi bias), :mod:`.buckets` (T5 and DeBERTa
log buckets), :mod:`.dense` (T5's learned-table bias), :mod:`.distance` (Kerple, FIRE's
input, Sandwich), :mod:`.relative` (the speech encoders' relative sinusoid tables),
:mod:`.xpos` (xPos scales), :mod:`.relative_terms` (the table rows that DeBERTa's c2p/p2c
terms and the relative shift of ``(q + v)·R`` read) and :mod:`.conventions`
(``BIAS_CONVENTIONS``). All float64 and exact, or a framework's own rounding under a
convention named after it.
"""
