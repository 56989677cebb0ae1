package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sigV4Transport signs every request with AWS Signature Version 4, as an
// IAM-protected Lambda Function URL (AuthType AWS_IAM) requires.
type sigV4Transport struct {
	base    http.RoundTripper
	creds   aws.CredentialsProvider
	signer  *v4.Signer
	region  string
	service string
	now     func() time.Time
}

func newSigV4Transport(base http.RoundTripper, creds aws.CredentialsProvider, region, service string) *sigV4Transport {
	return &sigV4Transport{base: base, creds: creds, signer: v4.NewSigner(), region: region, service: service, now: time.Now}
}

// RoundTrip signs a copy of req (its body hashed) and sends it.
func (t *sigV4Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.creds == nil {
		return nil, fmt.Errorf("sigv4: no AWS credentials")
	}
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	if len(body) == 0 && req.Body == nil {
		out.Body = nil
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	creds, err := t.creds.Retrieve(req.Context())
	if err != nil {
		return nil, fmt.Errorf("sigv4: retrieving AWS credentials: %w", err)
	}
	out.Header.Set("X-Amz-Content-Sha256", hash)
	if err := t.signer.SignHTTP(req.Context(), creds, out, hash, t.service, t.region, t.now()); err != nil {
		return nil, fmt.Errorf("sigv4: signing: %w", err)
	}
	return t.base.RoundTrip(out)
}
