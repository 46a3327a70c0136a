package dashboard

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// latencyAnswer is GET /api/v1/latency: p50 and p99 of the time from a
// request to its response, per method, over time buckets.
type latencyAnswer struct {
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	BucketMs float64         `json:"bucketMs"`
	Methods  []methodLatency `json:"methods"`
}

type methodLatency struct {
	Method string         `json:"method"`
	N      int            `json:"n"`
	P50    float64        `json:"p50"` // milliseconds
	P99    float64        `json:"p99"`
	Points []latencyPoint `json:"points"` // buckets with samples only
}

type latencyPoint struct {
	T   time.Time `json:"t"` // the bucket's start
	N   int       `json:"n"`
	P50 float64   `json:"p50"`
	P99 float64   `json:"p99"`
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func (s *Server) apiLatency(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := parseTime(q.Get("since"))
	if err != nil {
		badRequest(w, "since: "+err.Error())
		return
	}
	until, err := parseTime(q.Get("until"))
	if err != nil {
		badRequest(w, "until: "+err.Error())
		return
	}
	buckets := 24
	if v := q.Get("buckets"); v != "" {
		if buckets, err = strconv.Atoi(v); err != nil || buckets < 1 {
			badRequest(w, "buckets: want a positive number")
			return
		}
		buckets = min(buckets, 500)
	}
	ans, err := s.latency(r.Context(), since, until, buckets, q.Get("method"), q.Get("session"))
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// latencySample is one answered request: its method, when it was sent, and
// how long the answer took.
type latencySample struct {
	method string
	at     time.Time
	d      time.Duration
}

// defaultLatencyWindow is the range the chart covers when none is given:
// the last day of recording.
const defaultLatencyWindow = 24 * time.Hour

// latency reads the answered requests of the sessions in the range from the
// message index (request time to response time) and buckets them.
func (s *Server) latency(ctx context.Context, since, until time.Time, buckets int, method, session string) (*latencyAnswer, error) {
	if since.IsZero() && until.IsZero() && session == "" {
		for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Limit: 1}) {
			if err != nil {
				return nil, err
			}
			since = x.Start.Add(-defaultLatencyWindow)
		}
	}
	var samples []latencySample
	add := func(x *capture.Session) error {
		end := x.End
		if end.IsZero() {
			end = x.Start
		}
		if !since.IsZero() && end.Before(since) {
			return nil
		}
		sent := map[uint64]latencySample{}
		for m, err := range s.store.Messages(ctx, x.ID, capture.MessageQuery{NoRaw: true}) {
			if err != nil {
				return err
			}
			switch m.Kind {
			case protocol.KindRequest:
				if (since.IsZero() || !m.Time.Before(since)) && (until.IsZero() || m.Time.Before(until)) &&
					(method == "" || m.Method == method) {
					sent[m.Seq] = latencySample{method: m.Method, at: m.Time}
				}
			case protocol.KindResult, protocol.KindError:
				if p, ok := sent[m.Links.Request]; ok && m.Links.Request != 0 {
					delete(sent, m.Links.Request)
					if p.d = m.Time.Sub(p.at); p.d >= 0 {
						samples = append(samples, p)
					}
				}
			}
		}
		return nil
	}
	if session != "" {
		x, err := s.store.Session(ctx, session)
		if err != nil {
			return nil, err
		}
		if err := add(x); err != nil {
			return nil, err
		}
	} else {
		for x, err := range s.store.Sessions(ctx, capture.SessionQuery{Until: until}) {
			if err != nil {
				return nil, err
			}
			if err := add(x); err != nil {
				return nil, err
			}
		}
	}
	ans := &latencyAnswer{From: since, To: until, Methods: []methodLatency{}}
	if len(samples) == 0 {
		return ans, nil
	}
	if since.IsZero() || until.IsZero() {
		lo, hi := samples[0].at, samples[0].at
		for _, p := range samples {
			if p.at.Before(lo) {
				lo = p.at
			}
			if p.at.After(hi) {
				hi = p.at
			}
		}
		if since.IsZero() {
			ans.From = lo
		}
		if until.IsZero() {
			ans.To = hi.Add(time.Millisecond)
		}
	}
	width := max(ans.To.Sub(ans.From)/time.Duration(buckets), time.Millisecond)
	ans.BucketMs = float64(width.Microseconds()) / 1000

	byMethod := map[string][]latencySample{}
	for _, p := range samples {
		byMethod[p.method] = append(byMethod[p.method], p)
	}
	for m, ps := range byMethod {
		all := make([]time.Duration, len(ps))
		perBucket := map[int][]time.Duration{}
		for i, p := range ps {
			all[i] = p.d
			b := min(int(p.at.Sub(ans.From)/width), buckets-1)
			perBucket[b] = append(perBucket[b], p.d)
		}
		slices.Sort(all)
		ml := methodLatency{Method: m, N: len(all), P50: percentile(all, 50), P99: percentile(all, 99), Points: []latencyPoint{}}
		for b := range buckets {
			ds := perBucket[b]
			if len(ds) == 0 {
				continue
			}
			slices.Sort(ds)
			ml.Points = append(ml.Points, latencyPoint{T: ans.From.Add(time.Duration(b) * width), N: len(ds),
				P50: percentile(ds, 50), P99: percentile(ds, 99)})
		}
		ans.Methods = append(ans.Methods, ml)
	}
	// The busiest methods first.
	slices.SortFunc(ans.Methods, func(a, b methodLatency) int {
		if a.N != b.N {
			return b.N - a.N
		}
		if a.Method < b.Method {
			return -1
		}
		return 1
	})
	return ans, nil
}
