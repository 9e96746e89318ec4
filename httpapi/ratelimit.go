package httpapi

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/holdpoint/holdpoint/service"
)

// Defaults of the serve flags --rate-limit and --rate-burst.
const (
	// DefaultRateLimit is the sustained requests per second of one
	// credential.
	DefaultRateLimit = 20
	// DefaultRateBurst is how many requests one credential may send at once.
	DefaultRateBurst = 40
)

// sweepEvery is how often idle buckets are dropped.
const sweepEvery = time.Minute

// rateLimiter is a token bucket per credential (key id, user, or remote
// address in dev mode). Buckets are in memory: with several instances each
// enforces the limit on the requests it serves.
type rateLimiter struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
}

// newRateLimiter returns a limiter allowing perSecond requests with bursts
// of burst, or nil (no limit) when perSecond is not positive.
func newRateLimiter(perSecond float64, burst int) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	return &rateLimiter{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}, lastSweep: time.Now()}
}

// reserve takes a token from key's bucket. It returns zero when the request
// may go ahead, else how long until a token is available (nothing is
// taken then).
func (l *rateLimiter) reserve(key string, now time.Time) time.Duration {
	l.mu.Lock()
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.sweep(now)
	}
	b, ok := l.buckets[key]
	if !ok {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	l.mu.Unlock()

	r := b.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// sweep drops the buckets that are full again: a fresh bucket behaves the
// same, so forgetting them changes nothing but the memory held. The caller
// holds l.mu.
func (l *rateLimiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
	l.lastSweep = now
}

// limitRate answers 429 RESOURCE_EXHAUSTED with Retry-After (whole seconds)
// when the request's credential has used up its bucket. It runs after
// authentication, which chose the bucket.
func (a *api) limitRate(l *rateLimiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if l == nil {
			return next
		}
		return func(c echo.Context) error {
			acc, ok := accessOf(c)
			if !ok {
				return next(c) // an open route (health checks)
			}
			if wait := l.reserve(acc.rateKey, time.Now()); wait > 0 {
				secs := int64(math.Ceil(wait.Seconds()))
				c.Response().Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
				return service.Errorf(service.CodeResourceExhausted, "rate limit exceeded: retry later")
			}
			return next(c)
		}
	}
}
