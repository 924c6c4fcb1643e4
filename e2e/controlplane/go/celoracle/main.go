// Command celoracle answers, for each DRA selector it reads, what kube-scheduler's structured
// allocator would: it compiles and evaluates exactly as the allocator does (the DRA CEL compiler of
// k8s.io/dynamic-resource-allocation, through its cache's options, with the feature set the 1.37
// scheduler enables by default), so draxr's engines can be measured against upstream itself.
//
// Input, one JSON object a line on stdin:
//
//	{"expression": "...", "device": {"driver": "...", "attributes": {...}, "capacity": {...},
//	 "allowMultipleAllocations": true}}
//
// where attributes and capacity are shaped as in a ResourceSlice (resource.k8s.io/v1). Output, one
// JSON object a line on stdout, in input order:
//
//	{"compiles": bool, "compileError": "...", "matches": bool|null, "runtimeError": "...",
//	 "cost": n|null, "costExceeded": bool, "estimatedCost": n|null, "validates": bool,
//	 "validationError": "...", "inputError": "..."}
//
// where "validates" says whether the API server's validation compiles the selector as a new one
// (the environment for new expressions, at the release's compatibility version).
//
// A line that is not a valid request gets inputError and nothing else; the program goes on.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"
)

// request is one input line.
type request struct {
	Expression *string `json:"expression"`
	Device     *device `json:"device"`
}

// device is the part of a ResourceSlice device a selector reads.
type device struct {
	Driver                   string                                                    `json:"driver"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
}

// answer is one output line; pointers are JSON null when the step was not reached.
type answer struct {
	Compiles      bool    `json:"compiles"`
	CompileError  string  `json:"compileError,omitempty"`
	Matches       *bool   `json:"matches"`
	RuntimeError  string  `json:"runtimeError,omitempty"`
	Cost          *uint64 `json:"cost"`
	CostExceeded  bool    `json:"costExceeded"`
	EstimatedCost *uint64 `json:"estimatedCost"`
	Validates     bool    `json:"validates"`
	ValidationErr string  `json:"validationError,omitempty"`
	InputError    string  `json:"inputError,omitempty"`
}

// features are the scheduler's defaults in 1.37: DRAConsumableCapacity is beta and on,
// DRAListTypeAttributes alpha and off (pkg/scheduler/framework/plugins/dynamicresources).
var features = cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: false}

// costExceeded is cel-go's text for an evaluation stopped by the runtime cost limit.
const costExceeded = "actual cost limit exceeded"

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "celoracle: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	compiler := cel.GetCompiler(features)
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 64<<20)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		if err := enc.Encode(answerLine(compiler, []byte(line))); err != nil {
			return err
		}
		// One answer per line as soon as it is known: a caller may write and read in turn.
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func answerLine(compiler interface {
	CompileCELExpression(string, cel.Options) cel.CompilationResult
}, line []byte) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{InputError: fmt.Sprintf("panic: %v", r)}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return answer{InputError: "invalid request: " + err.Error()}
	}
	if req.Expression == nil || req.Device == nil {
		return answer{InputError: "invalid request: expression and device are required"}
	}
	// As the allocator's cache compiles selectors (cel.Cache.GetOrCompile): estimation off.
	expr := compiler.CompileCELExpression(*req.Expression, cel.Options{DisableCostEstimation: true})
	if expr.Error != nil {
		a.CompileError = expr.Error.Error()
	} else {
		a.Compiles = true
		d := req.Device
		matches, details, err := expr.DeviceMatches(context.Background(), cel.Device{
			Driver: d.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
			Attributes: d.Attributes, Capacity: d.Capacity,
		})
		if details != nil {
			a.Cost = details.ActualCost()
		}
		if err != nil {
			// The allocator reports cel.EnhanceRuntimeError(err) inside its own wrapping.
			a.RuntimeError = cel.EnhanceRuntimeError(err).Error()
			a.CostExceeded = strings.Contains(a.RuntimeError, costExceeded)
		} else {
			a.Matches = &matches
		}
	}
	// The worst-case estimate the API server's validation compares with the same limit.
	if est := compiler.CompileCELExpression(*req.Expression, cel.Options{}); est.Error == nil && est.MaxCost != math.MaxUint64 {
		a.EstimatedCost = &est.MaxCost
	}
	// As pkg/apis/resource/validation compiles a new selector: the environment for new expressions.
	newExpressions := environment.NewExpressions
	if v := compiler.CompileCELExpression(*req.Expression, cel.Options{EnvType: &newExpressions}); v.Error != nil {
		a.ValidationErr = v.Error.Error()
	} else {
		a.Validates = true
	}
	return a
}
