"""Attention biases for PyTorch: dense biases in the activation dtype (:mod:`.dense`), SDPA
masks (:mod:`.masks`), FlexAttention ``score_mod``/``block_mask`` (:mod:`.flex`) and the
modules holding learnable parts (:mod:`.modules`)."""
