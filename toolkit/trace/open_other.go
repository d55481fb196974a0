//go:build !unix

package trace

// noFollow is 0 where open has no O_NOFOLLOW.
const noFollow = 0

func isLoop(error) bool { return false }
