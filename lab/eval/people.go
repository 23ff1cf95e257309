package eval

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// Person is a synthesised recipient.
type Person struct {
	First, Last string
	Name        string // display name, e.g. "Maria Lopez"
	Address     string
}

var firstNames = strings.Fields(`James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth
William Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Christopher Lisa Daniel Nancy
Matthew Betty Anthony Sandra Mark Margaret Donald Ashley Steven Kimberly Andrew Emily Paul Donna Joshua
Michelle Kenneth Carol Kevin Amanda Brian Melissa George Deborah Timothy Stephanie Ronald Rebecca Jason
Sharon Edward Laura Jeffrey Cynthia Ryan Dorothy Jacob Amy Gary Kathleen Nicholas Angela Eric Shirley
Jonathan Emma Stephen Brenda Larry Pamela Justin Nicole Scott Anna Brandon Samantha Benjamin Katherine
Samuel Christine Gregory Debra Alexander Rachel Patrick Carolyn Frank Janet Raymond Maria Jack Olivia
Dennis Heather Jerry Helen Tyler Catherine Aaron Diane Jose Julie Adam Victoria Nathan Joyce Henry Lauren
Zachary Kelly Douglas Christina Peter Ruth Kyle Joan Noah Virginia Ethan Judith Jeremy Evelyn Walter
Hannah Christian Andrea Keith Megan Roger Cheryl Terry Jacqueline Austin Madison Sean Teresa Gerald
Abigail Carl Sophia Harold Martha Dylan Sara Arthur Gloria Lawrence Janice Jordan Kathryn Jesse Ann
Bryan Isabella Billy Judy Bruce Charlotte Gabriel Julia Joe Grace Logan Amber Alan Alice Juan Jean
Albert Denise Willie Frances Elijah Danielle Wayne Marilyn Randy Natalie Vincent Beverly Mason Diana
Roy Brittany Ralph Theresa Bobby Kayla Russell Alexis Bradley Doris Philip Lori Eugene Tiffany`)

var lastNames = strings.Fields(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez
Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris
Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green
Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Gomez Phillips Evans Turner Diaz Parker
Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper Peterson
Bailey Reed Kelly Howard Ramos Kim Cox Ward Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza
Ruiz Hughes Price Alvarez Castillo Sanders Patel Myers Long Ross Foster Jimenez Powell Jenkins Perry
Russell Sullivan Bell Coleman Butler Henderson Barnes Gonzales Fisher Vasquez Simmons Romero Jordan
Patterson Alexander Hamilton Graham Reynolds Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson
Ellis Tran Medina Aguilar Stevens Murray Ford Castro Marshall Owens Harrison Fernandez McDonald Woods
Washington Kennedy Wells Vargas Henry Chen Freeman Webb Tucker Guzman Burns Crawford Olson Simpson
Porter Hunter Gordon Mendez Silva Shaw Snyder Mason Dixon Munoz Hunt Hicks Holmes Palmer Wagner Black
Robertson Boyd Rose Stone Salazar Fox Warren Mills Meyer Rice Schmidt Garza Daniels Ferguson Nichols`)

var mailDomains = strings.Fields(`gmail.com yahoo.com hotmail.com outlook.com aol.com mail.example.org
comcast.net example.net web.example.de posteo.example icloud.com protonmail.example`)

// person returns the recipient with serial number n: distinct serials give
// distinct addresses (names repeat only after every first/last pair has
// been used, and then the address carries the serial).
func person(n int, rng *rand.Rand) Person {
	pairs := len(firstNames) * len(lastNames)
	// A fixed odd stride scatters consecutive serials over the name space.
	idx := (n * 7919) % pairs
	f, l := firstNames[idx%len(firstNames)], lastNames[idx/len(firstNames)]
	lf, ll := strings.ToLower(f), strings.ToLower(l)
	// Every form holds both names in full, so distinct pairs never share
	// an address.
	var local string
	switch rng.IntN(6) {
	case 0:
		local = lf + "." + ll
	case 1:
		local = lf + ll
	case 2:
		local = lf + "-" + ll
	case 3:
		local = lf + "_" + ll
	case 4:
		local = ll + "." + lf
	default:
		local = lf + "." + ll + strconv.Itoa(10+rng.IntN(90))
	}
	if n >= pairs {
		local += strconv.Itoa(n)
	}
	return Person{First: f, Last: l, Name: f + " " + l, Address: local + "@" + pick(rng, mailDomains)}
}
