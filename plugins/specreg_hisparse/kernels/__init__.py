"""HiSparse kernel families: the swap decision (`swap`) and the planned row copy (`planned_copy`)."""
