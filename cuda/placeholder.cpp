// replaced by the cuda module sources
