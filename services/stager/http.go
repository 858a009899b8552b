package stager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// httpEndpoint serves http:// and https:// URLs: GET downloads, PUT uploads. Its client
// dials only addresses the policy allows, and checks every redirect again.
type httpEndpoint struct {
	client *http.Client
	policy hostPolicy
}

// rootCAs is the system's trusted roots plus the PEM certificates in file (if any);
// nil (the system's) when there is no file.
func rootCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("stager: http.ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("stager: http.ca_file: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// ErrHTTPStatus is a response status that is not success.
var ErrHTTPStatus = errors.New("stager: http status")

// maxRedirects bounds redirect chains.
const maxRedirects = 10

func newHTTPEndpoint(p hostPolicy, timeout time.Duration, roots *x509.CertPool, res Resolver) *httpEndpoint {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Proxy:                 nil, // a proxy would dial on our behalf, past the policy
		DialContext:           p.dialer(dialer, res),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	h := &httpEndpoint{policy: p}
	h.client = &http.Client{Transport: tr, CheckRedirect: h.checkRedirect}
	return h
}

func (h *httpEndpoint) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if req.URL.Scheme != SchemeHTTP && req.URL.Scheme != SchemeHTTPS {
		return fmt.Errorf("%w: redirect to scheme %q", ErrPolicy, req.URL.Scheme)
	}
	if err := h.policy.checkName(req.URL.Hostname()); err != nil {
		return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
	}
	return nil
}

func (h *httpEndpoint) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, name, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, statusError(resp)
	}
	return resp.Body, resp.ContentLength, nil
}

func (h *httpEndpoint) put(ctx context.Context, name string, r io.Reader, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, name, io.NopCloser(r))
	if err != nil {
		return err
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	return nil
}

func (h *httpEndpoint) list(ctx context.Context, dir string) ([]string, error) {
	return nil, fmt.Errorf("%w: http directories cannot be listed: %s", ErrRemote, dir)
}

// statusError names a failed response; 4xx other than 408 and 429 will not get better.
func statusError(resp *http.Response) error {
	err := fmt.Errorf("%w: %s %s: %s", ErrHTTPStatus, resp.Request.Method, resp.Request.URL.Redacted(), resp.Status)
	switch c := resp.StatusCode; {
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return permanent{err}
	}
	return err
}
