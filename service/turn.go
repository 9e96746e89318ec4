package service

// Turn is what a custom agent's TurnFunc works with: the input of the turn
// and the session it may read and change.
type Turn struct{}
