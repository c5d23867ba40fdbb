package p

func H() int { return 2 }
