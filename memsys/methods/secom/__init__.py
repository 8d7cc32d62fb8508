"""SeCom (Pan et al., ``papers/secom.txt``): segment-level memory, compression-based denoising.

One module per step of the paper: :mod:`.segmenter` (§2.2, SeCom's one-call LLM segmenter,
Figure 6, also run by the segmentation benchmark: ``conf/segmenter/secom*.yaml``) with
:mod:`.reflection` (Appendix A.1's guidance learned by self-reflection), :mod:`.segmentation`
(§2.2, sessions into topical segments of whole exchanges by the configured segmenter),
:mod:`.denoising` (§2.3, Eq. 2's ``f_Comp``, exchange by exchange), :mod:`.memory` (the segments,
indexed by their compressed text), :mod:`.retrieval` (Eq. 2's ``f_R``: ranked by the compressed
text, returned as the original), :mod:`.prompts` (Figures 6 and 8) and :mod:`.method` (the
:class:`SeCom` memory system and its options, :class:`SeComOptions`; its docstring lists the
readings taken where the paper is vague). The compressors are shared with the denoised
baselines (:mod:`memsys.compression`). ``docs/methods/secom.md`` maps the paper to this code;
the configs are ``conf/method/secom*.yaml``.
"""

from memsys.methods.secom.denoising import denoise
from memsys.methods.secom.memory import SeComMemory, Segment
from memsys.methods.secom.method import SeCom, SeComOptions
from memsys.methods.secom.segmentation import SegmentSpan, segment_sessions

__all__ = [
    "SeCom",
    "SeComMemory",
    "SeComOptions",
    "Segment",
    "SegmentSpan",
    "denoise",
    "segment_sessions",
]
