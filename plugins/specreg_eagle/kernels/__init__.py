"""EAGLE's own kernel family: the draft loop's top-k selection (`select_topk`); its trees are built
and verified by the core's tree families (`specreg.kernels.tree_*`)."""
