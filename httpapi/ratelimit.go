package httpapi

import (
	"math"
	"net/netip"
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

// Defaults of the serve flags --ip-rate-limit and --ip-rate-burst.
const (
	// DefaultIPRateLimit is the sustained requests per second of one
	// remote address, counted before credentials are checked.
	DefaultIPRateLimit = 100
	// DefaultIPRateBurst is how many requests one remote address may send
	// at once.
	DefaultIPRateBurst = 200
)

// sweepEvery is how often idle buckets are dropped.
const sweepEvery = time.Minute

// rateLimiter is a token bucket per key: a credential (key id, user, or
// remote address in dev mode), or a remote address before authentication.
// Buckets are in memory: with several instances each enforces the limit on
// the requests it serves.
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

// limitAddressRate answers 429 RESOURCE_EXHAUSTED with Retry-After when
// the request's remote address has used up its bucket. It runs before
// authentication, so a flood of requests with made-up credentials costs no
// credential lookups. Health checks are exempt, so a prober is never
// throttled for its neighbours. Without authentication (dev mode) it does
// nothing: there is no lookup to shield, and limitRate already keeps a
// bucket per remote address there.
func (a *api) limitAddressRate(l *rateLimiter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if l == nil || a.opts.Auth == nil {
			return next
		}
		return func(c echo.Context) error {
			if route := c.Path(); route == "/healthz" || route == "/readyz" {
				return next(c)
			}
			if wait := l.reserve(addressKey(c), time.Now()); wait > 0 {
				return tooManyRequests(c, wait, "too many requests from this address: retry later")
			}
			return next(c)
		}
	}
}

// addressKey names the bucket of the request's remote address: the
// address itself for IPv4, its /64 network for IPv6, since one host
// usually holds a whole /64 and could otherwise use a fresh bucket per
// request.
func addressKey(c echo.Context) string {
	host := remoteHost(c)
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "addr:" + host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		return "net:" + netip.PrefixFrom(ip.WithZone(""), 64).Masked().String()
	}
	return "addr:" + ip.String()
}

// tooManyRequests is the 429 RESOURCE_EXHAUSTED answer, with Retry-After
// in whole seconds.
func tooManyRequests(c echo.Context, wait time.Duration, message string) error {
	secs := int64(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	return service.Errorf(service.CodeResourceExhausted, "%s", message)
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
				return tooManyRequests(c, wait, "rate limit exceeded: retry later")
			}
			return next(c)
		}
	}
}
